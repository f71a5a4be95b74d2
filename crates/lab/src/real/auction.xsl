<?xml version="1.0"?>
<!-- The real-program suite's stylesheet for Xalan-C: an auction site's data (XMark's
     structure) turned into an HTML report, with the work SPEC's xalancbmk stylesheet
     does: keyed look-ups across the document, sorting, grouping, counting, string
     functions and number formatting. -->
<xsl:stylesheet version="1.0" xmlns:xsl="http://www.w3.org/1999/XSL/Transform">
  <xsl:output method="html" indent="yes"/>
  <xsl:key name="person" match="person" use="@id"/>
  <xsl:key name="item" match="item" use="@id"/>
  <xsl:key name="bids-by-person" match="bidder" use="personref/@person"/>
  <xsl:key name="cat" match="category" use="@id"/>

  <xsl:template match="/site">
    <html><body>
      <h1>Regions</h1>
      <xsl:apply-templates select="regions/*"/>
      <h1>Open auctions by current price</h1>
      <table>
        <xsl:for-each select="open_auctions/open_auction">
          <xsl:sort select="number(translate(current, '.', ''))" data-type="number" order="descending"/>
          <tr>
            <td><xsl:value-of select="key('item', itemref/@item)/name"/></td>
            <td><xsl:value-of select="key('person', seller/@person)/name"/></td>
            <td><xsl:value-of select="count(bidder)"/></td>
            <td><xsl:value-of select="format-number(sum(bidder/increase), '#,##0.00')"/></td>
          </tr>
        </xsl:for-each>
      </table>
      <h1>People</h1>
      <xsl:for-each select="people/person">
        <xsl:sort select="name"/>
        <p>
          <xsl:value-of select="concat(translate(name, 'abcdefghijklmnopqrstuvwxyz', 'ABCDEFGHIJKLMNOPQRSTUVWXYZ'), ': ')"/>
          <xsl:value-of select="count(key('bids-by-person', @id))"/> bids,
          <xsl:value-of select="count(watches/watch)"/> watched,
          interest <xsl:value-of select="key('cat', profile/interest/@category)/name"/>
        </p>
      </xsl:for-each>
      <h1>Closed auctions</h1>
      <xsl:for-each select="closed_auctions/closed_auction[price &gt; 100]">
        <xsl:sort select="price" data-type="number"/>
        <p><xsl:value-of select="key('person', buyer/@person)/name"/> paid
           <xsl:value-of select="format-number(price, '0.00')"/> for
           <xsl:value-of select="key('item', itemref/@item)/name"/>:
           <xsl:value-of select="substring(annotation/description/text, 1, 40)"/></p>
      </xsl:for-each>
    </body></html>
  </xsl:template>

  <xsl:template match="regions/*">
    <h2><xsl:value-of select="name()"/> (<xsl:value-of select="count(item)"/> items)</h2>
    <ul>
      <xsl:for-each select="item">
        <xsl:sort select="name"/>
        <li>
          <xsl:value-of select="name"/>
          (<xsl:value-of select="string-length(description/text)"/> characters,
          <xsl:value-of select="key('cat', incategory[1]/@category)/name"/>)
          <xsl:if test="contains(description/text, 'rare')"> rare</xsl:if>
        </li>
      </xsl:for-each>
    </ul>
  </xsl:template>
</xsl:stylesheet>
